# gpufleet.nvidia — the commands the README names.
.PHONY: help test demo setup lint sanity unit property property-long playbook docs matrix molecule clean bench bench-scale ee

help:
	@echo "make test   set up what is missing, then lint, sanity, unit, property, playbook, docs, matrix, integration, package and molecule"
	@echo "make demo   bring up the local lab (Debian 12, Debian 13 and EL 9 stand-in containers) and run site.yml against it"
	@echo "make setup  only the host packages, the virtual environment and the node images"
	@echo "make property-long  the property suite (tests/property) at twenty times make test's examples (docs/reliability.md)"
	@echo "make bench  the cost of a converge: no-op and first site.yml against their floors, 1-8 lab nodes (docs/performance.md)"
	@echo "make ee     build the execution environment for AWX/AAP offline and run site.yml twice through it with ansible-runner (docs/scale.md)"
	@echo "make bench-scale  site.yml over 8-256 simulated nodes on the local connection, next to its floor (docs/performance.md)"

test:
	scripts/test.sh

demo:
	scripts/demo.sh

bench:
	bench/run.sh

bench-scale:
	bench/scale.sh

ee:
	scripts/build-ee.sh
	scripts/run-ee.sh

setup:
	scripts/setup-host.sh
	scripts/setup-venv.sh
	scripts/build-images.sh
	scripts/build-el-images.sh

lint:
	STAGES=lint scripts/test.sh
sanity:
	STAGES=sanity scripts/test.sh
unit:
	STAGES=unit scripts/test.sh
# The property suite: `ci` (fixed seed and budget, make test's stage), `long` (20x the examples).
property:
	STAGES=property scripts/test.sh
property-long:
	HYPOTHESIS_PROFILE=long STAGES=property scripts/test.sh

playbook:
	STAGES=playbook scripts/test.sh

docs:
	STAGES=docs scripts/test.sh

matrix:
	STAGES=matrix scripts/test.sh
molecule:
	STAGES=molecule scripts/test.sh

clean:
	rm -rf .build .cache .venv tests/output
