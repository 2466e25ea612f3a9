"""An environment on disk: where it lives (``location``), the proof the tool made it
(``marker``), changing it without half-built states (``txn``), and its Jupyter kernel
(``jupyter``). Every mode's backend builds through these; nothing else deletes an env."""
