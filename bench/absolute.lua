-- wrk script for the benchmarks in this directory.
--
--   wrk ... http://PROXY_HOST:PROXY_PORT/ -- http://ORIGIN_HOST:ORIGIN_PORT/path
--
-- With a target after "--", every request is sent in absolute form, the way
-- a client talks to a forward proxy, to whatever address wrk connects to:
--
--   GET http://ORIGIN_HOST:ORIGIN_PORT/path HTTP/1.1
--   Host: ORIGIN_HOST:ORIGIN_PORT
--
-- Without one, wrk's own origin-form request is sent unchanged, so the same
-- script measures the origin directly and the summary lines compare.
--
-- done() prints one line "KPBENCH-RESULT {json}" with the counts and the
-- latency percentiles in microseconds: wrk's human-readable summary rounds
-- and switches units, the JSON does neither.

local request_text = nil

function init(args)
   local target = args[1]
   if target == nil or target == "" then
      return
   end
   local authority = target:match("^%a[%w+.-]*://([^/]+)")
   if authority == nil then
      error("target must be an absolute URL, not " .. target)
   end
   -- A fresh header table: wrk.headers already carries a Host naming the
   -- proxy, which the origin must not see.
   request_text = wrk.format("GET", target, { ["Host"] = authority })
end

function request()
   if request_text then
      return request_text
   end
   return wrk.format()
end

local function percentiles(latency, list)
   local out = {}
   for _, p in ipairs(list) do
      out[#out + 1] = string.format('"%s":%d', tostring(p), latency:percentile(p))
   end
   return "{" .. table.concat(out, ",") .. "}"
end

function done(summary, latency, requests)
   local e = summary.errors
   io.write(string.format(
      'KPBENCH-RESULT {"duration_us":%d,"requests":%d,"bytes":%d,' ..
      '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
      '"latency_us":{"min":%d,"mean":%.1f,"max":%d,"stdev":%.1f,"percentiles":%s}}\n',
      summary.duration, summary.requests, summary.bytes,
      e.connect, e.read, e.write, e.status, e.timeout,
      latency.min, latency.mean, latency.max, latency.stdev,
      percentiles(latency, { 50, 90, 99, 99.9 })))
end
