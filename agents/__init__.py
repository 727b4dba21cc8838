"""assay.agents"""
