"""assay.sandbox"""
