"""assay.cli"""
