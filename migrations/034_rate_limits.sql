-- A subscription's rate limits (RateLimitsSet on the account stream, applied inline like the budget):
-- JSON {requestsPerMinute, tokensPerMinute, concurrentRequests, keyRequestsPerMinute, keyTokensPerMinute,
-- keyConcurrentRequests}, each a positive integer or null (the deployment's default). NULL: all defaults.
ALTER TABLE rm_accounts ADD COLUMN rate_limits jsonb;
