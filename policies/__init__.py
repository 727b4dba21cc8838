"""assay.policies"""
