"""The full-feature VM, run for real: the offline Debian box (:mod:`vm.box`), the accelerator probe
(:mod:`vm.accel`) and the run that boots it, tests the stock kernel's paths in it and leaves nothing
behind (:mod:`vm.run`); ``make vm`` (``.venv/bin/python -m vm``) drives them."""
