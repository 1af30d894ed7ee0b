"""gpuops_lab: the local Kubernetes control plane, simulated GPU nodes, the local chart repository
and the operator simulator used by `make demo` and the tests. Test infrastructure; not shipped in the
collection artifact."""
