# One image for the API and the GPU workers: CUDA runtime + CuPy + gemmwatch (NVRTC and nvcc come
# as wheels with '.[gpu]', with Triton, and torch and Helion for "language": "helion" kernels; g++ is
# nvcc's host compiler for "compiler": "nvcc" kernels).
FROM nvidia/cuda:13.0.1-runtime-ubuntu24.04

ENV DEBIAN_FRONTEND=noninteractive PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    VIRTUAL_ENV=/opt/gemmwatch PATH=/opt/gemmwatch/bin:$PATH \
    CUPY_CACHE_DIR=/var/cache/gemmwatch/cupy \
    GEMMWATCH_KERNEL_CACHE_DIR=/var/cache/gemmwatch/cubin
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv g++ libseccomp2 \
    && rm -rf /var/lib/apt/lists/* && python3 -m venv $VIRTUAL_ENV

WORKDIR /app
COPY pyproject.toml README.md alembic.ini ./
COPY core core
COPY api api
COPY worker worker
COPY kernels kernels
COPY dashboard dashboard
COPY migrations migrations
COPY cli cli
RUN pip install '.[gpu]'
# CUTLASS's headers for kernels that name "libraries": ["cutlass"] (the wheel's Python dependencies unused)
RUN pip install --no-deps 'nvidia-cutlass>=4.2'

RUN useradd --create-home --uid 10001 gemmwatch && mkdir -p /var/cache/gemmwatch/cupy \
    && chown -R gemmwatch /var/cache/gemmwatch
USER gemmwatch
EXPOSE 8000
CMD ["gemmwatch", "serve", "--host", "0.0.0.0", "--port", "8000"]
