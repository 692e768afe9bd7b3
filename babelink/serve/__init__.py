"""REST service and browser viewer over a `Linker` (`babelink serve`)."""

from babelink.serve.api import create_app
from babelink.serve.limits import ServiceLimits

__all__ = ["ServiceLimits", "create_app"]
