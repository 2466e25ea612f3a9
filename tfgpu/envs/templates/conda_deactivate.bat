@REM tfgpu-install: restore PATH as it was before this env's activate.d script ran.
@if not defined _TFGPU_OLD_PATH goto :eof
@set "PATH=%_TFGPU_OLD_PATH%"
@set "_TFGPU_OLD_PATH="
