"""assay.tui"""
