-- Argo CD health check for DorisChangelogSync (dcs.dev), as the argocd-cm key
-- resource.customizations.health.dcs.dev_DorisChangelogSync (charts/README.md, "GitOps").
--
--   Progressing  the operator has not yet observed the latest spec, or the sync is on its way to
--                streaming: runner starting, snapshot being read, re-initialisation
--   Healthy      Streaming with Ready True, or a startup.mode snapshot sync whose snapshot is done
--   Degraded     Blocked or Failed (the Stalled condition, or a failing runner): the message is
--                the condition's reason and message, which say what to fix
--   Suspended    spec.suspend is true
--
-- It judges the sync by its aggregate conditions (Stalled, Reconciling, Ready) and phase, never by
-- per-table details, so a sync of several tables is judged by the same summary. It uses only what
-- Argo CD gives a script without resource.customizations.useOpenLibs: the base and table
-- libraries (no string, no math).
local hs = {}

local function condition(conditionType)
  if obj.status == nil or obj.status.conditions == nil then
    return nil
  end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == conditionType then
      return c
    end
  end
  return nil
end

local function isTrue(c)
  return c ~= nil and c.status == "True"
end

-- "Reason: message" of a condition, or the fallback when there is none.
local function says(c, fallback)
  if c == nil then
    return fallback
  end
  local reason = c.reason or ""
  local message = c.message or ""
  if reason ~= "" and message ~= "" then
    return reason .. ": " .. message
  end
  if reason ~= "" then
    return reason
  end
  return message
end

if obj.status == nil or obj.status.observedGeneration == nil then
  hs.status = "Progressing"
  hs.message = "waiting for the dcs operator's first status"
  return hs
end
if obj.metadata.generation ~= nil and obj.status.observedGeneration ~= obj.metadata.generation then
  hs.status = "Progressing"
  hs.message = "waiting for the dcs operator to observe generation " .. tostring(obj.metadata.generation)
  return hs
end

local phase = obj.status.phase or "Pending"
local ready = condition("Ready")
local stalled = condition("Stalled")
local reconciling = condition("Reconciling")

if phase == "Suspended" then
  hs.status = "Suspended"
  hs.message = says(ready, "spec.suspend is true")
  return hs
end
if isTrue(stalled) then
  hs.status = "Degraded"
  hs.message = says(stalled, "phase " .. phase)
  return hs
end
-- Operators from before the Stalled condition: the phase and Ready say the same.
if phase == "Blocked" or phase == "Failed" or (ready ~= nil and ready.status == "False" and ready.reason == "RunnerFailed") then
  hs.status = "Degraded"
  hs.message = says(ready, "phase " .. phase)
  return hs
end
if isTrue(reconciling) then
  hs.status = "Progressing"
  hs.message = says(reconciling, "phase " .. phase)
  return hs
end
if isTrue(ready) and (phase == "Streaming" or ready.reason == "SnapshotDone") then
  hs.status = "Healthy"
  hs.message = says(ready, "phase " .. phase)
  return hs
end
hs.status = "Progressing"
hs.message = says(ready, "phase " .. phase)
return hs
