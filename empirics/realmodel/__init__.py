"""A real trained model on the regime map: all-MiniLM-L6-v2, offline. ``real_model`` loads its weights,
heads and tokenizer, ``real_geometry`` reads one head's geometry, ``real_analysis`` places every head under
every protocol, ``real_records`` holds the typed results, and ``real`` is the public face that re-exports them.
"""
