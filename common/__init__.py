"""Small pieces shared by every package: the error hierarchy, unit conversions, the project's directory
and a free loopback port.

Pure standard library; safe to import from any layer.
"""
