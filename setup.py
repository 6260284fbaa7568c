"""trainperf's one compiled part, beside pyproject.toml (which holds everything else): resnet's JPEG window decoder
and TF1 bilinear resize (trainperf/workloads/resnet/_window.c), built against the system's libjpeg-turbo
(Debian's libjpeg-dev, which scripts/setup.sh installs). Optional: where it does not build, the install goes on
and resnet's reference path decodes whole images with simplejpeg and resizes in torch, the same numbers, slower."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "trainperf.workloads.resnet._window",
            ["trainperf/workloads/resnet/_window.c"],
            libraries=["jpeg"],
            # each float32 operation rounded on its own, as torch's elementwise operations round them
            extra_compile_args=["-ffp-contract=off"],
            optional=True,
        )
    ]
)
