-- The library's functions. Clients call the first group (with FCALL / FCALL_RO); the second
-- is for the region's own services. `guarded` turns a failed check into an error reply.
redis.register_function('saturn_write', guarded(gear_write))
redis.register_function{function_name = 'saturn_check_write', callback = guarded(gear_check_write), flags = {'no-writes'}}
-- A read now changes nothing (FCALL_RO); one as of a time raises the clock and settles parts.
redis.register_function{function_name = 'saturn_read', flags = {'no-writes'}, callback = guarded(
  function(keys, args)
    if args[7] ~= '0' or args[8] ~= '0' then fail(CODE_INVALID, 'a read as of a time is saturn_read_at') end
    return gear_read(keys, args)
  end)}
redis.register_function('saturn_read_at', guarded(gear_read))
redis.register_function('saturn_stage', guarded(gear_stage))
redis.register_function('saturn_commit', guarded(gear_commit))
redis.register_function('saturn_settle', guarded(gear_settle))
redis.register_function('saturn_check', guarded(gear_check))
redis.register_function('saturn_migrate', guarded(gear_migrate))
redis.register_function('saturn_attach', guarded(gear_attach))
redis.register_function('saturn_claim', guarded(gear_claim))
-- Strong registers (strong.lua): the replica's part of Vivace's phases.
redis.register_function('saturn_strong_put', guarded(gear_strong_put))
redis.register_function('saturn_strong_stamp', guarded(gear_strong_stamp))
redis.register_function{function_name = 'saturn_strong_ts', callback = guarded(gear_strong_ts), flags = {'no-writes'}}
redis.register_function('saturn_strong_set_ts', guarded(gear_strong_set_ts))
redis.register_function{function_name = 'saturn_strong_data', callback = guarded(gear_strong_data), flags = {'no-writes'}}
-- Red operations ordered by a token (red.lua): Gemini's way, `[strong] mode = "token"`.
redis.register_function('saturn_red_close', guarded(gear_red_close))
redis.register_function('saturn_red_open', guarded(gear_red_open))
redis.register_function('saturn_red_get', guarded(gear_red_get))
redis.register_function('saturn_red_put', guarded(gear_red_put))
redis.register_function{
  function_name = 'saturn_version', callback = function() return API end, flags = {'no-writes'}
}
-- What a client learns of the whole topology from any one region (JSON, written at start).
redis.register_function{function_name = 'saturn_describe', flags = {'no-writes'}, callback = guarded(
  function(keys, args)
    check_api(args[1])
    config()
    check_consumed(args, 2)
    return redis.call('GET', DESCRIBE_KEY)
  end)}

redis.register_function('saturn_apply', sharded(gear_apply))
redis.register_function('saturn_stage_remote', guarded(gear_stage_remote))
redis.register_function('saturn_decide', guarded(gear_decide))
redis.register_function('saturn_stuck', sharded(gear_stuck))
redis.register_function('saturn_deliver', sharded(gear_deliver))
redis.register_function('saturn_outside_order', sharded(gear_outside_order))
redis.register_function('saturn_heartbeat', sharded(gear_heartbeat))
