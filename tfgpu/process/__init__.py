"""Process machinery: the one subprocess runner (runner), the environment a child gets
(childenv), bounded capture of its output (childpipes), stall watching (childwatch), pseudo-terminals,
and signal handling across a child's start (interrupts, signalmask).
"""
