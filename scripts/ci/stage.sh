# stage NAME LIMIT COMMAND...: runs one bounded step of CI and says how long it took.
# Sourced by .ci/run and the scripts under scripts/ci/; a failure (or running past LIMIT seconds)
# ends the calling script with status 1.
stage() {
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS
  echo "::: $name (limit ${limit}s): $*"
  if ! timeout --kill-after=30 "$limit" "$@"; then
    echo "::: $name FAILED after $((SECONDS - start))s"
    exit 1
  fi
  echo "::: $name took $((SECONDS - start))s"
}
