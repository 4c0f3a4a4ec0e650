"""Plain ACL (RocketMQ 4.9.8 `aclEnable`): accounts and whitelists from plain_acl.yml, checked per request."""
