#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_soak.sh - the short soak CI runs (20 s, make integration-long after
# make test); `make soak` runs the long one.
SOAK_SECONDS=${SOAK_SECONDS:-20} exec bash "$(dirname "$0")/soak.sh"
