"""assay.tools"""
