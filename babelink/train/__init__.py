"""Training code for the encoder (SAP), kept apart from inference."""
