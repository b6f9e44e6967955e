-- Tasks by status, for prometheus-redis-exporter's -script (exported as redis_script_values{key=...}).
-- A task is the hash <prefix>task:<id> with a plain `status` field (the record itself is sealed); the
-- scan reads only that field. Default prefix mrtr:, as the workers' MRTR_WORKER_REDIS_PREFIX.
local counts = {working = 0, input_required = 0, completed = 0, failed = 0, cancelled = 0}
local cursor = "0"
repeat
    local page = redis.call("SCAN", cursor, "MATCH", "mrtr:task:*", "COUNT", 500)
    cursor = page[1]
    for _, key in ipairs(page[2]) do
        local status = redis.call("HGET", key, "status")
        if status and counts[status] ~= nil then
            counts[status] = counts[status] + 1
        end
    end
until cursor == "0"
local reply = {}
for status, count in pairs(counts) do
    table.insert(reply, "tasks_" .. status)
    table.insert(reply, tostring(count))
end
return reply
