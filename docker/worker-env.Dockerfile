# The worker image's environment layer (emulator/worker_image.py builds it; no registry is used):
# this machine's distribution, debootstrapped and imported as BASE, and the project's venv
# copied in at its path on this machine, where its interpreter link and scripts resolve.
ARG BASE
FROM ${BASE}
ARG BUILD
ARG VENV
LABEL dtnet.testbed=env dtnet.build=${BUILD}
COPY venv/ ${VENV}/
