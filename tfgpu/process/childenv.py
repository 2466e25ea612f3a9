"""The environment a child process gets (``tfgpu.process.runner`` is the door that starts it): nothing that
would make it install elsewhere or import other code, every index URL it would read through the URL
door, and no proxy for plain HTTP.
"""

from __future__ import annotations

from collections.abc import Mapping

# Variables that would make a child install somewhere else or import the wrong code.
_DROP = (
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "PYTHONUSERBASE",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "CONDA_DEFAULT_ENV",
    "CONDA_SHLVL",
    "__PYVENV_LAUNCHER__",
    "UV_PROJECT_ENVIRONMENT",
    "UV_SYSTEM_PYTHON",
)
# Variables that name where uv or pip fetch packages from, and how each one separates its URLs (None:
# one URL). Each one present passes the URL door (tfgpu.doors.urls) before a child is started, so a
# corporate HTTPS mirror keeps working and plain HTTP to a host not named is insecure-url before
# anything runs; a run that must use one index only (a lock's) blanks them for its command.
INDEX_VARIABLES = {
    "UV_INDEX": " ",
    "UV_INDEX_URL": None,
    "UV_EXTRA_INDEX_URL": " ",
    "UV_DEFAULT_INDEX": None,
    "UV_FIND_LINKS": ",",
    "PIP_INDEX_URL": None,
    "PIP_EXTRA_INDEX_URL": " ",
    "PIP_FIND_LINKS": " ",
}
# Other pip settings that are kept: a certificate, patience. PIP_TRUSTED_HOST (plain HTTP, or no
# certificate check, for hosts the URL door never heard of) and PIP_PROXY (used for plain HTTP too)
# are dropped with every other PIP_ variable.
_KEEP_PIP = (
    *(name for name in INDEX_VARIABLES if name.startswith("PIP_")),
    "PIP_CERT",
    "PIP_CLIENT_CERT",
    "PIP_DEFAULT_TIMEOUT",
    "PIP_RETRIES",
)
# Plain HTTP never goes through a proxy: over plain HTTP the proxy could answer for the named host.
# HTTPS_PROXY and NO_PROXY stay (a tunnel to a TLS-verified host); ALL_PROXY serves HTTPS only.
_PLAIN_PROXIES = ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


def clean_environment(base: Mapping[str, str], extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` without the variables that leak another environment into a child, its index
    variables checked by the URL door (``UsageError`` insecure-url or bad-url), and no proxy for
    plain HTTP."""
    env = {
        key: value
        for key, value in base.items()
        if key not in _DROP and not (key.startswith("PIP_") and key not in _KEEP_PIP)
    }
    for name, separator in INDEX_VARIABLES.items():
        if env.get(name):
            env[name] = checked_index(name, env[name], separator)
    env = without_plain_proxy(env)
    env.update(extra or {})
    return env


def checked_index(name: str, value: str, separator: str | None) -> str:
    """``value`` of the index variable ``name``, each URL in it through the URL door (a local
    find-links directory is not a URL; ``UV_INDEX`` entries may be ``name=URL``)."""
    # Start-up cost: `doctor` loads this module but not tfgpu.doors.urls.
    from tfgpu.doors import urls

    kept = []
    for item in value.split(separator) if separator else [value]:
        if not item:
            continue
        label, url = ("", item)
        if name == "UV_INDEX" and "=" in item.split("://", 1)[0]:
            label, _, url = item.partition("=")
            label += "="
        if not (name.endswith("FIND_LINKS") and urls.is_local(url) and "\\" not in url):
            # Start-up cost: `doctor` loads this module but not tfgpu.datasource.transport.
            from tfgpu.datasource.transport import preflight

            url = urls.checked(url, name)
            preflight(url if name.endswith("FIND_LINKS") else url.rstrip("/") + "/", f"{name}'s redirect target")
        kept.append(label + url)
    return (separator or "").join(kept)


def without_plain_proxy(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with no proxy for plain HTTP (see ``_PLAIN_PROXIES``)."""
    found = {key: value for key, value in env.items() if key not in _PLAIN_PROXIES}
    every = env.get("ALL_PROXY") or env.get("all_proxy")
    if every and not (env.get("HTTPS_PROXY") or env.get("https_proxy")):
        found["HTTPS_PROXY"] = every
    return found
