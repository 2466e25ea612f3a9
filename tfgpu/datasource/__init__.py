"""Reading TensorFlow's release facts from their primary source, the wheels on PyPI.

Used by ``tfgpu-install update-data`` (``tfgpu/datasource/update.py``) and by ``scripts/regen_tf_data.py``,
which imports these modules instead of keeping its own copies. Standard library only, and never
imported by the resolver: planning reads tables, it does not fetch.

* ``http``: JSON documents and byte ranges, with timeouts, size bounds, retries and a disk cache;
* ``remote_zip``: the members of a remote wheel, read through byte ranges only;
* ``wheel_facts``: METADATA, ``build_info.py`` and the CUDA/cuDNN headers, parsed (pure);
* ``releases``: one release's rows, read from its wheels;
* ``toml_out``: those rows written as TOML.
"""
