"""The operator's `/admin/...` endpoints of one worker (`routes`), behind the operator's token (`guard`)."""
