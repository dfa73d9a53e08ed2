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

# install_missing PACKAGE...: apt-get installs those of the Debian packages that are not installed yet.
# Run it under `stage` as: stage NAME LIMIT bash -c "$(declare -f install_missing); install_missing ..."
install_missing() {
  local missing=() package sudo=""
  for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "installing ${missing[*]}"
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
