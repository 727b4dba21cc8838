"""assay.verifiers"""
