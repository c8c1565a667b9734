"""Skip and flag: an annotator sets a run aside (skip) or asks a reviewer to look (flag), with a reason."""
