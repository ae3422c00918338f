//! Analytical queueing models (SPEC §4): each in its own file under `analytic/`.
