"""What the CLI shows: rich layout for terminals and plain text for pipes (console), progress
(live, bars) and the renderers of each command's result. Only tfgpu.cli imports these.
"""
