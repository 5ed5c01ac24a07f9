"""YuniKorn's REST API (`/ws/v1/...`): router.py routes and answers, dao.py builds YuniKorn's
objects, ops.py the scheduler-wide ones (docs/operations.md, "YuniKorn's REST API")."""
