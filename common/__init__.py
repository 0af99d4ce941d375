"""Small utilities shared by every layer: input validation and atomic file writes.

``common`` sits below ``theory`` in the layer contract and imports nothing from the project.
"""
