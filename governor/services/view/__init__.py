"""What people read: the dashboard's read models (the status, the detail pages, what needs an
operator first, the operators' list of tokens), the run report, and the metrics `/metrics`
shows. Read only.

May use: `governor.domain`, `governor.db`, every other room of the services, and the shared
modules.
"""
