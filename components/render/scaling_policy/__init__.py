"""The Ray Serve autoscaling policy raypd ships into the cluster, and how it gets there (issue 30 §2).

- `raypd_pd_autoscaling.py`: the policy itself, an application-level Serve policy under which each
  phase of a prefill/decode app scales on its own load. It runs inside Ray (Serve's build task
  imports it, Serve's controller calls it), not in raypd: one self-contained file, standard
  library only, shipped verbatim. Its docstring says which signal each phase scales on and why.
- `delivery.py`: pure functions for what carries it there: the Serve config's application-level
  `autoscaling_policy` block, and the ConfigMap, volume, mount and PYTHONPATH that put the file on
  the Python path of every Ray container (the DLC image is fixed; nothing is added to it).

Part of components/render: what the cluster runs is rendered here, and the file's text becomes a
ConfigMap (as components/render/data/ holds the AWS policy documents raypd sends verbatim). Imports
nothing of raypd above components/render (the policy module imports nothing of raypd at all).
"""
