"""Small pieces shared by every package: the error hierarchy and unit conversions.

Pure standard library; safe to import from any layer.
"""
