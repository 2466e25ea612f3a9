# --- system mode: NVIDIA's CUDA runfile + cuDNN archive, then a venv with plain TensorFlow --------
# shellcheck shell=bash

check_driver
if [ "$(id -u)" = 0 ]; then IS_ROOT=1; else IS_ROOT=0; fi
if [ "$IS_ROOT" = 1 ]; then
    TFGPU_CUDA_PREFIX="${TFGPU_CUDA_PREFIX:-/usr/local}"
else
    TFGPU_CUDA_PREFIX="${TFGPU_CUDA_PREFIX:-${XDG_DATA_HOME:-$HOME/.local/share}/tfgpu-install}"
fi
TFGPU_DOWNLOADS="${TFGPU_DOWNLOADS:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/tfgpu-install/downloads}"
CUDA_HOME="$TFGPU_CUDA_PREFIX/cuda-$CUDA_MAJOR_MINOR"
CUDNN_HOME="$TFGPU_CUDA_PREFIX/cudnn-$CUDNN_FULL_VERSION-cuda$CUDA_MAJOR"
mkdir -p "$TFGPU_DOWNLOADS" "$TFGPU_CUDA_PREFIX"

# fetch FILENAME URL SHA256 MD5: download once into TFGPU_DOWNLOADS, resumable, then checked.
fetch() {
    local name="$1" url="$2" sha256="$3" md5="$4" path proto attempt
    path="$TFGPU_DOWNLOADS/$name"
    if [ -n "${TFGPU_DOWNLOAD_BASE:-}" ]; then
        url="${TFGPU_DOWNLOAD_BASE%/}/$name"
    fi
    proto='=https'
    if [ "${TFGPU_ALLOW_HTTP:-0}" = 1 ]; then
        proto='=https,http'
    elif [ "${url#https://}" = "$url" ]; then
        die "refusing to download $url: not HTTPS (TFGPU_ALLOW_HTTP=1 allows a trusted plain-http mirror; checksums are checked either way)"
    fi
    if [ -f "$path" ] && checksum_ok "$path" "$sha256" "$md5"; then
        in_place "download $name (checksum verified)"
        return 0
    fi
    say "downloading $url"
    command -v curl >/dev/null 2>&1 || die "curl is needed to download $url"
    # An interrupted transfer is resumed (--continue-at -), here and on the next run of the script.
    # On a terminal curl draws its bar there (bytes, of the total); elsewhere it stays quiet, not a
    # meter redrawn every second into a log.
    local shown=(--silent --show-error) errors="$TFGPU_LOG"
    if [ -t 2 ]; then shown=(--progress-bar) errors=/dev/stderr; fi
    for attempt in 1 2 3 4 5; do
        printf '%s\n' "+ curl $url (attempt $attempt)" >>"$TFGPU_LOG"
        if curl --fail --location "${shown[@]}" --proto "$proto" --retry 3 --retry-delay 2 \
            --continue-at - --output "$path.partial" "$url" >>"$TFGPU_LOG" 2>>"$errors"; then
            break
        fi
        [ "$attempt" != 5 ] || die "downloading $url failed 5 times; run again to resume (details in $TFGPU_LOG)"
        warn "download of $name interrupted (attempt $attempt); resuming in $((attempt * 2)) s"
        sleep $((attempt * 2))
    done
    checksum_ok "$path.partial" "$sha256" "$md5" ||
        { rm -f "$path.partial"; die "checksum mismatch for $name: the download is corrupt or not NVIDIA's file (deleted; run again to retry)"; }
    mv -f "$path.partial" "$path"
    changed "downloaded $name (checksum verified)"
}

checksum_ok() {
    local path="$1" sha256="$2" md5="$3"
    if [ -n "$sha256" ]; then
        printf '%s  %s\n' "$sha256" "$path" | sha256sum -c --status -
    else
        printf '%s  %s\n' "$md5" "$path" | md5sum -c --status -
    fi
}

fetch "$RUNFILE_NAME" "$RUNFILE_URL" "$RUNFILE_SHA256" "$RUNFILE_MD5"
fetch "$CUDNN_NAME" "$CUDNN_URL" "$CUDNN_SHA256" "$CUDNN_MD5"

# The toolkit only: never the driver. A stamp records which runfile filled CUDA_HOME.
if [ -f "$CUDA_HOME/.tfgpu-runfile" ] && [ "$(cat "$CUDA_HOME/.tfgpu-runfile")" = "$RUNFILE_NAME" ]; then
    in_place "CUDA $CUDA_TOOLKIT_VERSION toolkit in $CUDA_HOME"
else
    say "installing the CUDA $CUDA_TOOLKIT_VERSION toolkit into $CUDA_HOME (no driver)"
    runfile_tmp="$(mktemp -d "${TMPDIR:-/tmp}/tfgpu-runfile.XXXXXX")"
    run_logged sh "$TFGPU_DOWNLOADS/$RUNFILE_NAME" --silent --toolkit --toolkitpath="$CUDA_HOME" \
        --override --no-man-page --tmpdir="$runfile_tmp"
    rm -rf "$runfile_tmp"
    printf '%s\n' "$RUNFILE_NAME" >"$CUDA_HOME/.tfgpu-runfile"
    changed "installed the CUDA $CUDA_TOOLKIT_VERSION toolkit in $CUDA_HOME"
fi

if [ -f "$CUDNN_HOME/.tfgpu-archive" ] && [ "$(cat "$CUDNN_HOME/.tfgpu-archive")" = "$CUDNN_NAME" ]; then
    in_place "cuDNN $CUDNN_FULL_VERSION in $CUDNN_HOME"
else
    say "unpacking cuDNN $CUDNN_FULL_VERSION into $CUDNN_HOME"
    rm -rf "$CUDNN_HOME.partial"
    mkdir -p "$CUDNN_HOME.partial"
    run_logged tar -xf "$TFGPU_DOWNLOADS/$CUDNN_NAME" -C "$CUDNN_HOME.partial" --strip-components=1
    # The legacy tarballs name the library directory lib64; the redist archives lib.
    if [ -d "$CUDNN_HOME.partial/lib64" ] && [ ! -e "$CUDNN_HOME.partial/lib" ]; then
        ln -s lib64 "$CUDNN_HOME.partial/lib"
    fi
    printf '%s\n' "$CUDNN_NAME" >"$CUDNN_HOME.partial/.tfgpu-archive"
    rm -rf "$CUDNN_HOME"
    mv "$CUDNN_HOME.partial" "$CUDNN_HOME"
    changed "unpacked cuDNN $CUDNN_FULL_VERSION in $CUDNN_HOME"
fi

# Make the libraries findable: system-wide when root, else an activation file under the prefix.
ENV_FILE_CONTENT="$(printf '%s\n' \
    "# tfgpu-install: CUDA $CUDA_TOOLKIT_VERSION and cuDNN $CUDNN_FULL_VERSION for TensorFlow $TF_VERSION" \
    "# shellcheck shell=sh" \
    "export CUDA_HOME=$(printf %q "$CUDA_HOME")" \
    "case \":\$PATH:\" in *\":\$CUDA_HOME/bin:\"*) ;; *) export PATH=\"\$CUDA_HOME/bin:\$PATH\" ;; esac" \
    "case \" \${XLA_FLAGS:-} \" in *--xla_gpu_cuda_data_dir=*) ;; *) export XLA_FLAGS=\"\${XLA_FLAGS:+\$XLA_FLAGS }--xla_gpu_cuda_data_dir=\$CUDA_HOME\" ;; esac")"
LIBRARY_DIRS="$CUDA_HOME/lib64
$CUDNN_HOME/lib"
if [ "$IS_ROOT" = 1 ] && [ "${TFGPU_SYSTEM_WIDE:-1}" = 1 ]; then
    TFGPU_ETC="${TFGPU_ETC:-/etc}"
    mkdir -p "$TFGPU_ETC/profile.d" "$TFGPU_ETC/ld.so.conf.d"
    printf '%s\n' "$ENV_FILE_CONTENT" | write_if_changed "$TFGPU_ETC/profile.d/tfgpu-cuda-$CUDA_MAJOR_MINOR.sh" 644
    ld_before="$CHANGED"
    CHANGED=0
    printf '%s\n' "$LIBRARY_DIRS" | write_if_changed "$TFGPU_ETC/ld.so.conf.d/tfgpu-cuda-$CUDA_MAJOR_MINOR.conf" 644
    if [ "$CHANGED" = 1 ] && [ "$TFGPU_ETC" = /etc ]; then
        run_logged ldconfig
    fi
    [ "$ld_before" = 1 ] && CHANGED=1
    ACTIVATION_FILE="$TFGPU_ETC/profile.d/tfgpu-cuda-$CUDA_MAJOR_MINOR.sh"
else
    ACTIVATION_FILE="$TFGPU_CUDA_PREFIX/tfgpu-cuda-$CUDA_MAJOR_MINOR.sh"
    {
        printf '%s\n' "$ENV_FILE_CONTENT"
        # shellcheck disable=SC2016  # ${LD_LIBRARY_PATH...} is meant for the file, expanded when it is sourced
        printf 'export LD_LIBRARY_PATH=%q:%q"${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"\n' "$CUDA_HOME/lib64" "$CUDNN_HOME/lib"
    } | write_if_changed "$ACTIVATION_FILE" 644
fi

# The venv: plain tensorflow (its CUDA comes from the toolkit above, not from wheels).
ensure_venv
pins_pip
pip_install "$TFGPU_PREFIX/bin/python" "$TFGPU_PREFIX/etc/tfgpu/installed-requirements.txt" "${PIP_REQUIREMENTS[@]}"
# The toolkit and cuDNN this env uses, linked into it: a modulefile (script --format slurm) or a
# person finds them at <env>/etc/tfgpu/cuda and <env>/etc/tfgpu/cudnn wherever TFGPU_CUDA_PREFIX was.
mkdir -p "$TFGPU_PREFIX/etc/tfgpu"
for link_name in cuda cudnn; do
    if [ "$link_name" = cuda ]; then link_target="$CUDA_HOME"; else link_target="$CUDNN_HOME"; fi
    if [ "$(readlink "$TFGPU_PREFIX/etc/tfgpu/$link_name" 2>/dev/null)" = "$link_target" ]; then
        in_place "link $TFGPU_PREFIX/etc/tfgpu/$link_name"
    else
        ln -sfn "$link_target" "$TFGPU_PREFIX/etc/tfgpu/$link_name"
        changed "linked $TFGPU_PREFIX/etc/tfgpu/$link_name -> $link_target"
    fi
done
if ! grep -qF "$ACTIVATION_FILE" "$TFGPU_PREFIX/bin/activate"; then
    printf '\n%s\n' ". $(printf %q "$ACTIVATION_FILE")  # tfgpu-install: CUDA for this venv" >>"$TFGPU_PREFIX/bin/activate"
    changed "the venv's activate script sources $ACTIVATION_FILE"
else
    in_place "the venv's activate script sources $ACTIVATION_FILE"
fi

verify_with_toolkit() {
    (
        # shellcheck source=/dev/null
        . "$ACTIVATION_FILE"
        export LD_LIBRARY_PATH="$CUDA_HOME/lib64:$CUDNN_HOME/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        verify "$TFGPU_PREFIX/bin/python"
    )
}
verify_with_toolkit
finish
say "use it: source $TFGPU_PREFIX/bin/activate (it loads $ACTIVATION_FILE)"
