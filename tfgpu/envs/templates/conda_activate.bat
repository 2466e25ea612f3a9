@REM tfgpu-install: this conda env's CUDA DLLs first on PATH (native Windows, TF <= 2.10);
@REM the deactivate.d twin restores PATH exactly. Generated; do not edit.
@if defined _TFGPU_OLD_PATH goto :eof
@set "_TFGPU_OLD_PATH=%PATH%"
@set "PATH=%CONDA_PREFIX%\Library\bin;%PATH%"
