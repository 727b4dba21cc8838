"""assay.ledger"""
