"""Team lockfiles and offline bundles: writing them (``writing``, with ``pip_lock`` for hashed
requirements + pylock.toml and ``conda_lock`` for conda-lock.yml), bundles (``bundle``,
``bundle_conda``), and reading them back for ``create --from-lock``/``--from-bundle``
(``install``, ``conda_install``, with the rules both share in ``selectors``): every check made
before anything is installed, the result handed to the installers as a ``Source``.
"""
