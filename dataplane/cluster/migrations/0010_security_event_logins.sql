-- Successful SASL logins ride the security events' channel (kind 'sasl_ok', detail = the credential's
-- username, an API key id; principal and host empty): the control plane folds them into the key's last_used_at
-- instead of the audit trail. One row per username per broker per flush.
ALTER TABLE security_events DROP CONSTRAINT security_events_kind_check;
ALTER TABLE security_events ADD CONSTRAINT security_events_kind_check
    CHECK (kind IN ('sasl_failed', 'acl_denied', 'sasl_ok'));
