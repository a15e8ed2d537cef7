# The worker image (emulator/worker_image.py builds it): the environment layer and the project's
# code at its path on this machine, so a worker's command and PYTHONPATH are the same in a
# container as in a process; the build fails here if the worker or the agent cannot import.
ARG ENV_IMAGE
FROM ${ENV_IMAGE}
ARG BUILD
ARG VENV
ARG PROJECT
LABEL dtnet.testbed=worker dtnet.build=${BUILD}
COPY project/ ${PROJECT}/
ENV PATH=${VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONPATH=${PROJECT} \
    PYTHONUNBUFFERED=1
WORKDIR ${PROJECT}
RUN ["python", "-c", "import jobs.worker, jobs.agent, torch.distributed"]
