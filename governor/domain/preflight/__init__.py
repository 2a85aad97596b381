"""Preflight admission: a fine-tuning plan checked in writing before any pod is rented.

plan.py    the plan a job submits (phases, hardware and rate, storage, the memory model)
gpus.py    what each GPU class really offers: usable memory (verified or derived, with its
           source), the lowest on-demand rate
memory.py  the per-GPU memory model with the governor's floors applied
cost.py    worst-case and expected cost, rounded to the billing increment
rules.py   the ordered rules, each returning its reason, and `admit` (go/canary_only/no_go)
"""
