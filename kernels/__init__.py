"""assay.kernels"""
