"""Inter-annotator agreement: pure computation (numpy / pandas in, plain data out).

* :mod:`.coefficients` — percent agreement, Cohen, Fleiss, Krippendorff's alpha, Gwet's AC1
  on a ratings matrix, with bootstrap intervals (:func:`compute` is the REST entry point).
* :mod:`.units` — turn labels into ratings matrices and build the agreement report.
* :mod:`.bootstrap` — the unit bootstrap used by the coefficients.
"""

from .coefficients import (
    COEFFICIENTS,
    DISTANCES,
    LEVELS,
    WEIGHTS,
    AgreementResult,
    CodedRatings,
    cohen_kappa,
    compute,
    compute_coded,
    encode_ratings,
    fleiss_kappa,
    gwet_ac1,
    jaccard_distance,
    krippendorff_alpha,
    masi_distance,
    pairwise_cohen_coded,
    pairwise_cohen_kappa,
    percent_agreement,
)

__all__ = [
    "COEFFICIENTS",
    "DISTANCES",
    "LEVELS",
    "WEIGHTS",
    "AgreementResult",
    "CodedRatings",
    "cohen_kappa",
    "compute",
    "compute_coded",
    "encode_ratings",
    "fleiss_kappa",
    "gwet_ac1",
    "jaccard_distance",
    "krippendorff_alpha",
    "masi_distance",
    "pairwise_cohen_coded",
    "pairwise_cohen_kappa",
    "percent_agreement",
]
