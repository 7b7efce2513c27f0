#!/usr/bin/env bash
# The steps of the repository's GitHub action (action.yml), one subcommand a step, so that a test can
# run them as GitHub would (tests/test_github_action.py). Inputs arrive as GW_* variables.
#   ci       `gemmwatch ci` on this commit; its exit code goes to the step's output `code`, never fails
#   comment  on a pull request, its one gemmwatch comment made or edited (`gemmwatch pr-comment`)
#   verdict  fails the check on a confirmed regression (exit 1), and on anything else but
#            success only where fail-on-error is true
set -u
summary="${RUNNER_TEMP:-/tmp}/gemmwatch-summary.md"
case "${1:-}" in
  ci)
    rm -f "$summary"
    sizes=()
    for s in ${GW_SIZES:-4096}; do sizes+=(--size "$s"); done
    if [ -n "${GW_BASE:-}" ]; then
      base=(--base "$GW_BASE")
    elif [ "${GITHUB_EVENT_NAME:-}" = pull_request ]; then
      base=(--base "$(git merge-base "origin/${GITHUB_BASE_REF}" HEAD)")
    else
      base=(--base-branch "${GW_BASE_BRANCH:-main}")
    fi
    gpu=()
    [ -n "${GW_GPU:-}" ] && gpu=(--gpu "$GW_GPU")
    code=0
    gemmwatch ci --commit "${GITHUB_SHA}" --branch "${GITHUB_HEAD_REF:-${GITHUB_REF_NAME:-}}" \
      --repo "${GITHUB_REPOSITORY:-}" "${base[@]}" --kernels-dir "${GW_KERNELS_DIR:-kernels}" "${sizes[@]}" \
      "${gpu[@]}" --timeout "${GW_TIMEOUT:-1800}" --summary-out "$summary" || code=$?
    echo "code=$code" >> "$GITHUB_OUTPUT"
    ;;
  comment)
    if [ "${GITHUB_EVENT_NAME:-}" != pull_request ]; then
      echo "not a pull request: no comment"
      exit 0
    fi
    pr=$(python3 -c 'import json, os; print(json.load(open(os.environ["GITHUB_EVENT_PATH"]))["pull_request"]["number"])')
    gemmwatch pr-comment --repo "$GITHUB_REPOSITORY" --pr "$pr" --exit-code "${GW_CODE:-3}" --summary "$summary" \
      --run-url "${GITHUB_SERVER_URL:-https://github.com}/${GITHUB_REPOSITORY}/actions/runs/${GITHUB_RUN_ID:-0}" \
      || echo "::warning::the pull request's comment could not be written (the verdict stands)"
    ;;
  verdict)
    code="${GW_CODE:-3}"
    case "$code" in
      0) exit 0 ;;
      1) echo "::error::gemmwatch: a confirmed regression"; exit 1 ;;
      *) if [ "${GW_FAIL_ON_ERROR:-false}" = true ]; then exit "$code"; fi
         echo "::warning::gemmwatch ci exited $code (a failed kernel, or no verdict): the check passes, as asked"
         exit 0 ;;
    esac
    ;;
  *) echo "usage: $0 ci|comment|verdict" >&2; exit 64 ;;
esac
