"""Studies: a taxonomy, a saved run selection and members with roles; the study scope; queue rules."""
