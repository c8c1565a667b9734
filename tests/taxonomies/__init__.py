"""Tests for taxonomy data files and the pure taxonomy loader."""
