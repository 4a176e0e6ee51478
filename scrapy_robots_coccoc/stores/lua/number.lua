-- A stored number, read only when written in decimal as ours are.
local function number(text)
  if type(text) == 'string' and (string.find(text, '^%-?%d+$') or string.find(text, '^%-?%d+%.%d+$')) then
    return tonumber(text)
  end
end
